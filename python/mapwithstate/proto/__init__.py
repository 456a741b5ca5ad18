"""Generated protobuf modules for the mapwithstate contract (proto/ at the repository root).

Made by ``dev/gen-proto python``; do not edit. ``tests/test_generated_proto.py`` fails when
they are stale.
"""
