import Testing

@testable import Lifeline
@testable import LifelineRules

// RFC 9110 5.6.7's own example date, in its three forms: 784111777 s since 1970.
@Test(arguments: [
    "Sun, 06 Nov 1994 08:49:37 GMT",
    "Sunday, 06-Nov-94 08:49:37 GMT",
    "Sun Nov  6 08:49:37 1994",
])
func httpDate_readsEachFormOfRFC9110sExample(_ text: String) {
    #expect(HTTPDate.seconds(text) == 784_111_777)
}

@Test func httpDate_knowsLeapYearsAndTheEpoch() {
    #expect(HTTPDate.seconds("Thu, 01 Jan 1970 00:00:00 GMT") == 0)
    #expect(HTTPDate.seconds("Tue, 29 Feb 2000 12:00:00 GMT") == 951_825_600)
    #expect(HTTPDate.seconds("Wed, 31 Dec 2025 23:59:59 GMT") == 1_767_225_599)
    // Two-digit years below 70 are this century's.
    #expect(HTTPDate.seconds("Monday, 01-Jan-24 00:00:00 GMT") == 1_704_067_200)
}

@Test(arguments: [
    "", "soon", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 31 Feb 1994 08:49:37 GMT",
    "Fri, 29 Feb 2019 00:00:00 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 6 Nov 1994 08:49:37 GMT",
    "Sun, 06 Foo 1994 08:49:37 GMT", "Sun Nov 32 08:49:37 1994",
])
func httpDate_refusesWhatIsNoDate(_ text: String) {
    #expect(HTTPDate.seconds(text) == nil)
}

@Test func retryAfter_takesSecondsOrADateAgainstTheClock() {
    let now = 784_111_777.0
    #expect(RetryAfter.seconds("120", now: now) == 120)
    #expect(RetryAfter.seconds(" 7 ", now: now) == 7)
    #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:50:07 GMT", now: now) == 30)
    // A date already past means at once.
    #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:00:00 GMT", now: now) == 0)
    #expect(RetryAfter.seconds("later", now: now) == nil)
}
