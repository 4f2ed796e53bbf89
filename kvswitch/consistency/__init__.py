"""The single-key consistency protocol's rules, in the product (docs/protocol.md "Consistency")."""
