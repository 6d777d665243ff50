//! From a finished (or interrupted) experiment's records to its report:
//! reads the frozen contract, the ledger and every valid run back from disk,
//! analyses them as the contract says, and writes `runs.csv`,
//! `analysis.json`, `report.md` and the plots.

use harness::Folder;
use serde::{Deserialize, Serialize};

use crate::{
    analysis::{self, Analysis},
    config::Config,
    contract::{CONTRACT, Contract},
    plots,
    records::{Attempt, LEDGER, load},
    report,
};

/// `analysis.json`: the contract the analysis followed, and its results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnalysisFile {
    pub contract: Contract,
    pub analysis: Analysis,
}

pub fn render(config: &Config, folder: &Folder) -> anyhow::Result<String> {
    let contract: Contract = folder.read_json(CONTRACT)?;
    let ledger: Vec<Attempt> = folder.read_csv(LEDGER)?;
    let (mut runs, mut traces) = (Vec::new(), Vec::new());
    for attempt in ledger.iter().filter(|a| a.valid) {
        let (run, trace) = load(&folder.existing(&attempt.dir)?, attempt, contract.workers)?;
        runs.push(run);
        traces.push(trace);
    }
    let names: Vec<String> = contract
        .policies
        .iter()
        .map(|p| p.name().to_string())
        .collect();
    let analysis = analysis::analyse(
        &runs,
        &names,
        &contract.windows,
        config.resamples,
        contract.seed,
    );
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
    folder.write_json("analysis.json", &AnalysisFile { contract, analysis })?;
    Ok(out)
}
