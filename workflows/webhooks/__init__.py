"""Webhook deliveries as the workflow sees them."""
