"""`bayesbench site`: the leaderboard as a static web site, built from the store (docs/site.md).

    bayesbench site                     # results/site/index.html: open it in a browser, no server
    bayesbench site --out public/ --db results/bayesbench.sqlite
"""

from __future__ import annotations

import os

from .args import add_db, check_folder, store_to_read


def add_parser(sub) -> None:
    p = sub.add_parser("site", help="the leaderboard as a static, self-contained web site (sortable tables, run pages "
                                    "with their curves and configuration, the dynamics studies' figures)")
    p.add_argument("--out", default=os.path.join("results", "site"),
                   help="output folder (default results/site; an earlier site there is replaced)")
    add_db(p)
    p.set_defaults(handler=cmd_site)


def cmd_site(args) -> int:
    from ..report.site import build_site
    from ..tasks.base import format_bytes

    check_folder("--out", args.out)
    store_to_read(args)
    built = build_site(args.db, args.out)
    print(f"wrote {built['index']} ({built['pages']} pages, {built['images']} images, {format_bytes(built['bytes'])}): "
          f"{built['rows']} leaderboard rows of {built['records']} stored seeds in {built['tables']} tables"
          + (f", {built['studies']} dynamics studies" if built["studies"] else ""))
    print("open it in a browser: no server needed (every script, style and image is in the folder)")
    return 0
