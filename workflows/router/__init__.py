"""The capability router (`agent: "auto"`): its workflow, models and decision matrix."""
