"""The work a scan goes through: intake, leasing, results, heartbeats and waits, an operator
failing a scan, and reading scans back."""
