"""Endpoint names by id, kept for the life of the process: names never change once an
endpoint exists, so events can name their endpoint without a join in every hot statement."""

from __future__ import annotations

from mainframe.store.database import Tx, value
from mainframe.store.sql import Sql

ENDPOINT_NAME = Sql("endpoint_name", "SELECT name FROM endpoints WHERE id = :endpoint")


class EndpointNames:
    def __init__(self) -> None:
        self._names: dict[int, str] = {}

    async def of(self, tx: Tx, endpoint_id: int) -> str:
        """The endpoint's name, read once per process."""
        name = self._names.get(endpoint_id)
        if name is None:
            name = str(await value(tx, ENDPOINT_NAME, {"endpoint": endpoint_id}))
            self._names[endpoint_id] = name
        return name
