"""Fill a PDF form from a JSON file of field values (test fixture)."""
import json
import sys


def main(argv):
    if len(argv) == 3 and argv[1] == "--list":
        print("would list the fields of", argv[2])
        return 0
    if len(argv) != 4:
        print("usage: fill_form.py FORM.pdf values.json out.pdf", file=sys.stderr)
        return 2
    with open(argv[2]) as f:
        values = json.load(f)
    print("would fill", len(values), "fields of", argv[1], "into", argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
