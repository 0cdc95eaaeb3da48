"""Store records to the JSON replies of the contract (mainframe.contract), shared by every
shell that shows them: the API sends them, the board renders them, the CLI prints them. A
unit test holds every function here to its contract model, field for field."""
