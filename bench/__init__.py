"""The benchmark suite (issue 5): ``bench/run`` measures map_with_state against what users
would otherwise use, on the same machine in the same run. See bench/README.md."""
