// The rules are the core's vocabulary: whoever imports the core gets them too, as before they
// had a target of their own.
@_exported import LifelineRules
