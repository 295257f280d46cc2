#if canImport(UIKit)
import UIKit
#else
import LifelineBackgroundTasks
#endif

/// Holds the example of Apple's article "Extending your app's background execution time"
/// (UIKit documentation), `sendDataToServer`, as Apple prints it, with only the imports changed.
/// The article shows the method alone; this class gives it the `backgroundTaskID` property it
/// uses and `sendAppDataToServer(data:)`, which the article leaves to the app (StandIns.swift).
final class DataSender {
    var backgroundTaskID: UIBackgroundTaskIdentifier?

    // From the article, as printed, but for one character: the page breaks its line after the dot
    // of `UIApplication.shared.`, which no Swift compiler accepts, so the dot starts the next line.
    // `UIBackgroundTaskInvalid` is `.invalid` since Swift 4.2; LifelineBackgroundTasks keeps the
    // old name so the text compiles as printed.
    func sendDataToServer( data : NSData ) {
       // Perform the task on a background queue.
       DispatchQueue.global().async {
          // Request the task assertion and save the ID.
          self.backgroundTaskID = UIApplication.shared
                     .beginBackgroundTask (withName: "Finish Network Tasks") {
             // End the task if time expires.
             UIApplication.shared.endBackgroundTask(self.backgroundTaskID!)
             self.backgroundTaskID = UIBackgroundTaskInvalid
          }
                
          // Send the data synchronously.
          self.sendAppDataToServer( data: data)
                
          // End the task assertion.
          UIApplication.shared.endBackgroundTask(self.backgroundTaskID!)
          self.backgroundTaskID = UIBackgroundTaskInvalid
       }
    }
}
