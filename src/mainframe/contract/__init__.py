"""What every shell of Mainframe shares about its inputs and outputs (the API, the board, the
CLI, the SDK): name rules and the way sender text is shown. It imports nothing of the server,
so any layer may use it."""
