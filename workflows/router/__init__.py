"""The capability router (`agent: "auto"`): the router run's steps (`RunRouter`), its
models and its pure decision matrix."""
