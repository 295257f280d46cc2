import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

@Test(arguments: [
    ("a", "."), ("r.json", "."), ("./r", "."), ("sub/r", "sub"), ("sub//r", "sub/"), ("sub/./r", "sub/."),
    ("/r", "/"), ("/a/b/", "/a"), ("plugins/good/", "plugins"), ("/", "/"), ("", "."),
])
func parentFolder_isThePartBeforeTheLastName(_ path: String, _ parent: String) {
    #expect(parentFolder(of: path) == parent)
}
