"""The site in a real browser: `bayesbench site` built from a tiny real store and opened from disk
in headless Chromium (Selenium): every stored row is in the table, a click on a column's header
sorts it, a run link opens its page, every image loads, the filter hides rows; a screenshot is
saved (the one in docs/img/site.png was taken this way, from a larger store).

Skipped, with the reason, only where no Chromium, chromedriver or selenium is installed (`make
setup` installs them where apt is available)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from bayesbench.report.site import build_site
from bayesbench.store.database import read_records


def _browser():
    """(chromium, chromedriver) paths, or a skip naming what is missing."""
    missing = []
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package (pip install selenium)")
    chromium = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                    None)
    driver = shutil.which("chromedriver")
    if chromium is None:
        missing.append("a Chromium browser (apt-get install chromium)")
    if driver is None:
        missing.append("chromedriver (apt-get install chromium-driver)")
    if missing:
        pytest.skip("the browser test needs " + ", ".join(missing) + "; `make setup` installs them where apt is "
                    "available")
    return chromium, driver


@pytest.fixture(scope="module")
def browser():
    chromium, driver_path = _browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000",
                "--disable-gpu", "--allow-file-access-from-files"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


IMAGES_LOADED = ("return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])")


def _images(driver) -> list:
    driver.execute_script("document.querySelectorAll('img').forEach(i => i.loading = 'eager')")
    driver.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 10).until(lambda d: all(c for _, c, _ in d.execute_script(IMAGES_LOADED)))
    return driver.execute_script(IMAGES_LOADED)


def _column(driver, table, header_text: str) -> list[float]:
    from selenium.webdriver.common.by import By

    headers = table.find_elements(By.CSS_SELECTOR, "thead th")
    index = next(i for i, th in enumerate(headers) if th.text.split("\n")[0].startswith(header_text))
    return [float(row.find_elements(By.TAG_NAME, "td")[index].get_attribute("data-value"))
            for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")]


def test_the_site_in_headless_chromium(tiny_store, browser, tmp_path):
    from selenium.webdriver.common.by import By

    db = tiny_store["db"]
    out = str(tmp_path / "site")
    built = build_site(db, out)
    stored = read_records(db)
    driver = browser
    driver.get("file://" + os.path.abspath(built["index"]))
    assert driver.title == "bayesbench leaderboard"

    # every stored (run, seed) is in a row of the table
    rows = driver.find_elements(By.CSS_SELECTOR, "table.board tbody tr")
    shown = {m for row in rows for m in row.get_attribute("data-members").split()}
    assert shown == {f"{r.run_id}:{r.seed}" for r in stored} and len(rows) == built["rows"] == 2
    assert {row.find_element(By.CSS_SELECTOR, "td.arch a").text for row in rows} == {"mlp", "lstm"}
    assert len(driver.find_elements(By.CSS_SELECTOR, "table.board tfoot tr")) == 2  # the uniform and marginal floors

    # a click on a header sorts by that column, a second click reverses it
    table = driver.find_element(By.CSS_SELECTOR, "table.board")
    kl_header = next(th for th in table.find_elements(By.CSS_SELECTOR, "thead th") if th.text.startswith("KL"))
    kl_header.find_element(By.TAG_NAME, "button").click()
    assert kl_header.get_attribute("aria-sort") == "ascending"
    ascending = _column(driver, table, "KL")
    assert ascending == sorted(ascending) and ascending[0] < ascending[-1]
    kl_header.find_element(By.TAG_NAME, "button").click()
    assert kl_header.get_attribute("aria-sort") == "descending"
    assert _column(driver, table, "KL") == ascending[::-1]
    first_arch = table.find_element(By.CSS_SELECTOR, "tbody tr td.arch a").text

    # the filter hides the rows without the words typed
    box = driver.find_element(By.ID, "filter")
    box.send_keys("lstm")
    visible = [r for r in driver.find_elements(By.CSS_SELECTOR, "table.board tbody tr") if r.is_displayed()]
    assert [r.find_element(By.CSS_SELECTOR, "td.arch a").text for r in visible] == ["lstm"]
    assert driver.find_element(By.ID, "filter-count").text == "1 of 2 rows shown"
    box.clear()
    box.send_keys(" ")

    # every image of the leaderboard loads
    images = _images(driver)
    assert len(images) == 2 and all(width > 0 for _, _, width in images), images
    shot = str(tmp_path / "site.png")
    driver.execute_script("window.scrollTo(0, 0)")
    assert driver.save_screenshot(shot) and os.path.getsize(shot) > 10_000

    # a run link opens the run's page: its results, its figures and its configuration (run.json)
    driver.find_element(By.CSS_SELECTOR, "table.board tbody tr td.arch a").click()
    assert "/runs/" in driver.current_url and driver.current_url.endswith(".html")
    assert driver.find_element(By.TAG_NAME, "h1").text == f"{first_arch} on sticky V=8 L=32"
    doc = json.loads(driver.find_element(By.ID, "configuration").text)
    run_id = driver.current_url.rsplit("/", 1)[1][:-len(".html")]
    assert doc["run_id"] == run_id and doc["arch"] == first_arch and [s["seed"] for s in doc["seeds"]] == [0, 1]
    images = _images(driver)
    assert len(images) == 2 and all(width > 0 for _, _, width in images), images  # learning curves, per position
    driver.find_element(By.LINK_TEXT, "\u2190 leaderboard").click()
    assert driver.current_url.split("#")[0].endswith("/index.html")


WIDTHS = """
const table = document.querySelector('table.board'), box = table.parentElement;
const last = table.querySelector('thead th:last-child').getBoundingClientRect(), inside = box.getBoundingClientRect();
return {window: document.documentElement.clientWidth, page: document.documentElement.scrollWidth,
        last_right: last.right, box_right: inside.right, box_scrolls: getComputedStyle(box).overflowX};
"""


def test_a_wide_table_fits_a_1400_pixel_window(tiny_store, browser, tmp_path):
    """The table overflowed a 1400-pixel window: a row pooling several runs (their links in the seeds
    cell), every interval on the mean's line and unwrapped headers put the last columns out of sight,
    behind a scroll bar under the table. At 1400 px the last column is now in the window; a table wider
    still scrolls inside its own box, never the page."""
    import dataclasses

    from bayesbench.store.database import write_records

    records = read_records(tiny_store["db"])
    db = str(tmp_path / "wide.sqlite")
    write_records(records + [dataclasses.replace(r, run_id="another-" + r.run_id, seed=r.seed + 2) for r in records],
                  db)
    built = build_site(db, str(tmp_path / "site"))
    browser.set_window_size(1400, 1000)
    browser.get("file://" + os.path.abspath(built["index"]))
    w = browser.execute_script(WIDTHS)
    assert w["page"] <= w["window"], w  # the page itself never scrolls sideways
    assert w["last_right"] <= min(w["box_right"], w["window"]) + 0.5, w  # the last column is in sight
    assert w["box_scrolls"] in ("auto", "scroll"), w  # and a wider table would scroll in its box
