"""Line and order totals."""


def line_total(unit_price: float, quantity: int, discount: float = 0.0) -> float:
    return unit_price * quantity * (1 - discount)


def order_total(lines: list[tuple[float, int, float]]) -> float:
    total = 0.0
    for unit_price, quantity, discount in lines:
        total += line_total(unit_price, quantity, discount)
    # TODO: round per line, not once at the end
    return round(total, 2)
