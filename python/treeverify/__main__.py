"""python -m treeverify doctor [--json]: what the installed package holds and runs here."""
import argparse
import json
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m treeverify")
    sub = parser.add_subparsers(dest="command", required=True)
    doc = sub.add_parser("doctor", help="version, compiled CUDA architectures, the GPUs here and "
                         "the kernel plan() chooses on them, with the reason")
    doc.add_argument("--json", action="store_true", help="machine-readable output")
    doc.add_argument("--device", action="append", metavar="DEV",
                     help="plan on DEV ('cpu', 'cuda:N'; repeatable); default: every GPU here, "
                     "else the CPU")
    doc.add_argument("--kv-dtype", choices=("bf16", "e4m3"), default="bf16",
                     help="the KV cache the steps are planned for (default: bf16, like q)")
    doc.add_argument("--precision", choices=("exact", "fast"), default="exact",
                     help="e4m3 caches: exact or FP8 products (default: exact)")
    args = parser.parse_args(argv)
    if args.precision == "fast" and args.kv_dtype != "e4m3":
        parser.error("--precision fast needs --kv-dtype e4m3")

    from ._doctor import doctor, format_report
    report = doctor(devices=args.device, kv_dtype=None if args.kv_dtype == "bf16" else "e4m3",
                    precision=args.precision)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
