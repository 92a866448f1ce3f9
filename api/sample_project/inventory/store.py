"""An in-memory stock store."""


class Store:
    def __init__(self) -> None:
        self._stock: dict[str, int] = {}

    def add(self, sku: str, quantity: int) -> None:
        # TODO: reject zero and negative quantities
        self._stock[sku] = self._stock.get(sku, 0) + quantity

    def remove(self, sku: str, quantity: int) -> None:
        # FIXME: this can drive stock below zero
        self._stock[sku] = self._stock.get(sku, 0) - quantity

    def level(self, sku: str) -> int:
        return self._stock.get(sku, 0)
