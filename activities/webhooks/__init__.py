"""Webhook deliveries: the signed POST and its signature."""
