"""The rule every cpullm command follows, for the Python ones (sweep, tune, report): bad input
ends in one line on stderr, 'cpullm: error: ...', and exit status 1. argparse's own way (usage
text and exit status 2) is replaced by ArgumentParser.error."""
import argparse
import sys


def fail(message):
    print(f"cpullm: error: {' '.join(str(message).split())}", file=sys.stderr)
    sys.exit(1)


def os_error(e):
    """An OSError as 'FILE: what is wrong', the way the C++ side words it."""
    return f"{e.filename}: {e.strerror}" if e.filename else str(e)


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message):
        fail(message)
