"""Accounts and credentials: owners, endpoints with their zeroed outcome totals, tokens, board
sessions, and the audit trail of what owners did."""
