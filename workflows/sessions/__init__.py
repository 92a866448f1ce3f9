"""Sessions: the workflow that holds a conversation's runs in order."""
