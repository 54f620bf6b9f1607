"""The ``gradhunt`` command."""
import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="gradhunt", description=__doc__)
    parser.parse_args(argv)
    print("gradhunt: no command yet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
