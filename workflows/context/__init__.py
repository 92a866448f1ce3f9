"""The context budget: the model's window and what a request may hold."""
