from inventory.pricing import line_total, order_total


def test_line_total() -> None:
    assert line_total(2.5, 4) == 10.0


def test_order_total() -> None:
    assert order_total([(2.5, 4, 0.0), (1.0, 1, 0.5)]) == 10.5
