import Foundation
@testable import AuthflowAgent
import OAuthFlow
import Testing

/// The Prometheus text (Documentation/Agent.md, "Metrics").
@Suite("The agent's metrics")
struct MetricsTests {
    @Test("metrics: label values from servers are escaped and bounded")
    func metricsEscaping() {
        var status = RefreshScheduler.Status()
        status.failures = ["bad\"code\\\n\u{07}": 1]
        let text = AgentMetrics.render(["p": status], now: Date(timeIntervalSince1970: 0), started: Date(timeIntervalSince1970: 5))
        #expect(text.contains(#"authflow_refresh_failures_total{provider="p",error="bad\"code\\\n"} 1"#))
        #expect(text.contains("authflow_agent_start_time_seconds 5\n"))
    }
}
