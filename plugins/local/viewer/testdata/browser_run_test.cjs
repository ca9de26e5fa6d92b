// Drives the trace viewer in headless Chromium (playwright-core, Debian chromium) over the
// store of a real `rlhost train` run: the list and the comparisons each row offers, a
// trajectory's chat, a training row across epochs, a validation sample across steps, and a
// GRPO group; screenshots go to OUT_DIR.
// Usage: node browser_run_test.cjs URL OUT_DIR   (NODE_PATH must reach playwright-core)
// Prints one JSON object with what it saw; the Go test (TestTracesViewerOnTrainingRun) checks it.
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
  const text = async sel => (await page.textContent(sel)).replace(/\s+/g, " ").trim();
  let page;
  try {
    page = ctx.pages()[0] || await ctx.newPage();
    page.on("pageerror", e => seen.errors.push(String(e)));
    page.on("console", m => { if (m.type() === "error") seen.errors.push(m.text()); });

    // The list: each row with the comparisons it offers.
    await page.goto(url);
    await page.waitForSelector("#list tbody tr");
    seen.rows = await page.$$eval("#list tbody tr", trs => trs.map(tr => ({
      id: tr.dataset.id, step: Number(tr.children[1].textContent), sample: Number(tr.children[2].textContent),
      rollout: Number(tr.children[3].textContent), validate: tr.children[4].textContent === "true",
      reward: Number(tr.children[5].textContent), advantage: tr.children[6].textContent,
      links: [...tr.querySelectorAll("td.links a")].map(a => a.textContent.trim()) })));
    await page.screenshot({ path: path.join(outDir, "run-list.png") });

    // A training trajectory: its chat, then the same data row across epochs.
    // A training row of a group with a signal (advantages not 0) where the run has one.
    const epochs = r => !r.validate && r.links.some(l => l.startsWith("compare epochs"));
    const train = seen.rows.find(r => epochs(r) && r.advantage !== "0" && r.advantage !== "") || seen.rows.find(epochs);
    if (!train) throw new Error("no training row offers 'compare epochs'");
    seen.trainId = train.id;
    await page.goto(`${url}#/t/${train.id}`);
    await page.waitForSelector("#chat");
    seen.trainMeta = await text("#traj-meta");
    seen.trainChat = await page.$$eval("#chat .msg", ms => ms.map(m => ({
      role: m.className.replace("msg", "").replace("error", "").trim(), content: m.querySelector(".content").textContent })));
    seen.trainLinks = await page.$$eval("#app > p a", as => as.map(a => a.id).filter(Boolean));
    await page.screenshot({ path: path.join(outDir, "run-trajectory.png"), fullPage: true });

    await page.click("#to-compare");
    await page.waitForSelector("#compare .card");
    seen.epochs = await compareView(page);
    await page.screenshot({ path: path.join(outDir, "run-compare-epochs.png"), fullPage: true });

    // Its GRPO group: the n rollouts side by side with rewards and advantages.
    await page.goto(`${url}#/t/${train.id}`);
    await page.waitForSelector("#to-group");
    await page.click("#to-group");
    await page.waitForSelector("#group .card");
    seen.group = await page.$$eval("#group .card", cs => cs.map(c => ({
      rollout: Number(c.dataset.rollout), reward: Number(c.querySelector(".reward").textContent),
      advantage: c.querySelector(".adv").textContent.trim(), text: c.querySelector(".content").textContent })));
    seen.groupTitle = await text("#app h3");
    await page.screenshot({ path: path.join(outDir, "run-group.png"), fullPage: true });

    // A validation sample across steps.
    const val = seen.rows.find(r => r.validate);
    if (!val) throw new Error("no validation row");
    seen.valId = val.id;
    await page.goto(`${url}#/t/${val.id}`);
    await page.waitForSelector("#chat");
    seen.valLinks = await page.$$eval("#app > p a", as => as.map(a => a.id).filter(Boolean));
    if (seen.valLinks.includes("to-compare")) {
      await page.click("#to-compare");
      await page.waitForSelector("#compare .card");
      seen.steps = await compareView(page);
      await page.screenshot({ path: path.join(outDir, "run-compare-steps.png"), fullPage: true });
    }

    // The two runs' validation (serve --against): pairs at the last common step, then step 0.
    await page.goto(url);
    await page.waitForSelector("#to-runs");
    await page.click("#to-runs");
    await page.waitForSelector("#runs .card");
    const runsView = async () => ({
      title: (await page.textContent("#app h3")).trim(),
      summary: (await page.textContent("#runs-summary")).replace(/\s+/g, " ").trim(),
      cards: await page.$$eval("#runs .card", cs => cs.map(c => ({
        heading: c.querySelector("h4").textContent.replace(/\s+/g, " ").trim(),
        reward: Number(c.querySelector(".reward").textContent), text: c.querySelector(".content").textContent,
        del: [...c.querySelectorAll("del")].map(d => d.textContent), ins: [...c.querySelectorAll("ins")].map(d => d.textContent) }))),
    });
    seen.runs = await runsView();
    await page.screenshot({ path: path.join(outDir, "run-runs.png"), fullPage: true });
    await page.selectOption("#runs-step", "0");
    await page.waitForFunction(() => document.querySelector("#app h3") && document.querySelector("#app h3").textContent.includes("step 0"));
    seen.runs0 = await runsView();

    // A comparison asked for where there is no counterpart says so (the page's request is
    // answered 404: not an error of the page).
    page.removeAllListeners("console");
    await page.goto(`${url}#/compare?sample=999999&validate=false`);
    await page.waitForSelector("#error");
    seen.noCounterpart = await text("#error");
  } finally {
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(seen) + "\n");
}

// compareView reads the compare view: its title, the steps, and per card the heading, the
// reward, the text as shown, and the words marked deleted (left) or inserted (right).
async function compareView(page) {
  return {
    title: (await page.textContent("#app h3")).trim(),
    overviewSteps: await page.$$eval("#overview tbody tr", trs => trs.map(tr => Number(tr.children[0].textContent))),
    cards: await page.$$eval("#compare .card", cs => cs.map(c => ({
      heading: c.querySelector("h4").textContent.replace(/\s+/g, " ").trim(),
      reward: Number(c.querySelector(".reward").textContent),
      text: c.querySelector(".content").textContent,
      del: [...c.querySelectorAll("del")].map(d => d.textContent),
      ins: [...c.querySelectorAll("ins")].map(d => d.textContent) }))),
  };
}

main().catch(e => { console.error(e.stack || String(e)); process.exit(1); });
