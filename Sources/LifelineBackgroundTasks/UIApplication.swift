import Lifeline
