"""The lowest floor: typed errors, failpoints, CRC-32C, atomic small files, plain value types.

It imports nothing of twinlog; every other floor may import it.
"""
