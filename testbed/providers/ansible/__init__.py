"""Provider ``ansible``: many real hosts over SSH (see provider.py and docs/ansible.md)."""
