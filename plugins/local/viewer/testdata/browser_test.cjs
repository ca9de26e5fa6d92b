// Drives the trace viewer in headless Chromium (playwright-core, Debian chromium):
// open a run, filter, open a trajectory and the compare view, take screenshots.
// Usage: node browser_test.cjs URL OUT_DIR   (NODE_PATH must reach playwright-core)
// Prints one JSON object with what it saw; the Go test checks it.
"use strict";
const { chromium } = require("playwright-core");
const fs = require("fs");
const os = require("os");
const path = require("path");

async function main() {
  const [url, outDir] = process.argv.slice(2);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "rlhost-viewer-chromium-"));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
      "--disable-sync", "--no-first-run"],
    viewport: { width: 1400, height: 1000 },
  });
  const seen = { errors: [] };
  try {
    const page = ctx.pages()[0] || await ctx.newPage();
    page.on("pageerror", e => seen.errors.push(String(e)));
    page.on("console", m => { if (m.type() === "error") seen.errors.push(m.text()); });
    await page.goto(url);
    await page.waitForSelector("#list tbody tr");
    seen.allRows = await page.locator("#list tbody tr").count();
    await page.screenshot({ path: path.join(outDir, "list.png") });

    // Filter: step 2, training rollouts, reward at least 0.5.
    await page.fill("#f-step", "2");
    await page.selectOption("#f-validate", "false");
    await page.fill("#f-reward", "0.5-");
    await page.click("#apply");
    // the hash changes at once; the list is the filtered one once the query has answered
    await page.waitForFunction(() => location.hash.includes("step=2") && document.querySelector("#count") &&
      !document.querySelector("#count").textContent.startsWith("12 of"));
    await page.waitForSelector("#list");
    seen.filtered = await page.$$eval("#list tbody tr", trs => trs.map(tr => ({
      step: Number(tr.children[1].textContent), reward: Number(tr.children[5].textContent) })));
    seen.count = await page.textContent("#count");

    // Open a trajectory: the chat with its tool calls.
    await page.click("#list tbody tr:first-child td:nth-child(3)");
    await page.waitForSelector("#chat");
    seen.meta = await page.textContent("#traj-meta");
    seen.roles = await page.$$eval("#chat .msg", ms => ms.map(m => m.className.replace("msg", "").trim()));
    seen.toolText = await page.$$eval("#chat .msg.tool", ms => ms.map(m => m.textContent));
    await page.screenshot({ path: path.join(outDir, "trajectory.png"), fullPage: true });

    // The compare view of this sample: first and last step side by side, with a diff.
    await page.click("#to-compare");
    await page.waitForSelector("#compare .card");
    seen.overviewSteps = await page.$$eval("#overview tbody tr", trs => trs.map(tr => Number(tr.children[0].textContent)));
    seen.cards = await page.locator("#compare .card").count();
    seen.ins = await page.locator("#compare ins").count();
    seen.del = await page.locator("#compare del").count();
    seen.headings = await page.$$eval("#compare .card h4", hs => hs.map(h => h.textContent.replace(/\s+/g, " ").trim()));
    await page.screenshot({ path: path.join(outDir, "compare.png"), fullPage: true });
  } finally {
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(seen) + "\n");
}

main().catch(e => { console.error(e.stack || String(e)); process.exit(1); });
