"""Scripted model servers: demo and test support, never a real model."""
