//! From a finished (or interrupted) experiment's records to its report, in
//! two steps. `reduce` reads the frozen contract, the ledger and every valid
//! run's raw records (about 9 MB for five blocks), analyses them as the
//! contract says, and keeps the analysis (`analysis.json`) and what the plots
//! draw of the first block (`timelines.csv`, `sends.csv`). `render` writes
//! `runs.csv`, `report.md` and the plots from those alone.

use harness::Folder;
use serde::{Deserialize, Serialize};

use crate::{
    analysis::{self, Analysis},
    config::Config,
    contract::{CONTRACT, Contract},
    plots,
    records::{Attempt, LEDGER, SENDS, TIMELINES, load, trace_rows, traces_of},
    report,
};

/// `analysis.json`: the contract the analysis followed, and its results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnalysisFile {
    pub contract: Contract,
    pub analysis: Analysis,
}

pub const ANALYSIS: &str = "analysis.json";

pub fn reduce(config: &Config, raw: &Folder, out: &Folder) -> anyhow::Result<()> {
    let contract: Contract = out.read_json(CONTRACT)?;
    let ledger: Vec<Attempt> = out.read_csv(LEDGER)?;
    let (mut runs, mut traces) = (Vec::new(), Vec::new());
    for attempt in ledger.iter().filter(|a| a.valid) {
        let (run, trace) = load(&raw.existing(&attempt.dir)?, attempt, contract.workers)?;
        runs.push(run);
        traces.push(trace);
    }
    let names: Vec<String> = contract.policies.iter().map(|p| p.to_string()).collect();
    let analysis = analysis::analyse(
        &runs,
        &names,
        &contract.windows,
        config.resamples,
        contract.seed,
    );
    // The plots draw the first block only.
    let first = traces.iter().map(|t| t.block).min();
    traces.retain(|t| Some(t.block) == first);
    let (timelines, sends) = trace_rows(&traces);
    out.write_csv(TIMELINES, &timelines)?;
    out.write_csv(SENDS, &sends)?;
    out.write_json(ANALYSIS, &AnalysisFile { contract, analysis })
}

pub fn render(_: &Config, folder: &Folder) -> anyhow::Result<String> {
    let AnalysisFile { contract, analysis } = folder.read_json(ANALYSIS)?;
    let ledger: Vec<Attempt> = folder.read_csv(LEDGER)?;
    let traces = traces_of(&folder.read_csv(TIMELINES)?, &folder.read_csv(SENDS)?);
    folder.write_csv("runs.csv", &report::run_rows(&analysis))?;
    folder.write_text(
        "report.md",
        &report::markdown(&contract, &analysis, &ledger),
    )?;
    plots::plots(folder, &analysis, &traces)?;
    let mut out = format!("\n{}", report::headline(&contract, &analysis));
    for line in report::acceptance(&contract, &analysis) {
        out.push_str(&line);
        out.push('\n');
    }
    let invalid = ledger.iter().filter(|a| !a.valid).count();
    out.push_str(&format!(
        "{} attempts, {} valid, {invalid} excluded\n",
        ledger.len(),
        ledger.len() - invalid
    ));
    Ok(out)
}
