//! `weft schedules --flows DIR [--json] [--count N]`: the schedules of the flows in a folder
//! (`settings.schedules`) with their next occurrences, in each schedule's time zone. A flow
//! whose schedules cannot be used is named with its problems, and the command exits 1.

use serde_json::json;

use crate::output::{self, Style};
use crate::{Exit, SchedulesArgs, usage_error};

pub(crate) fn schedules(args: &SchedulesArgs) -> anyhow::Result<Exit> {
    let flows = weft_api::schedules::scheduled_flows(&args.flows).map_err(|error| {
        usage_error(format!(
            "cannot read the folder {}: {error}",
            args.flows.display()
        ))
    })?;
    let upcoming = weft_api::schedules::upcoming(&flows, chrono::Utc::now(), args.count);
    let broken: Vec<(&str, &Vec<String>)> = flows
        .iter()
        .filter_map(|flow| Some((flow.name.as_str(), flow.schedules.as_ref().err()?)))
        .collect();
    if args.json {
        let problems: Vec<_> = broken
            .iter()
            .map(|(flow, problems)| json!({ "flow": flow, "problems": problems }))
            .collect();
        let text =
            serde_json::to_string_pretty(&json!({ "schedules": upcoming, "problems": problems }))?;
        output::out(&format!("{text}\n"))?;
    } else {
        let style = Style::stdout();
        let mut text = String::new();
        if upcoming.is_empty() && broken.is_empty() {
            text.push_str(&format!(
                "no flow in {} has schedules (settings.schedules)\n",
                args.flows.display()
            ));
        }
        for schedule in &upcoming {
            text.push_str(&format!(
                "{}  {}  {}\n",
                style.bold(&format!("{}[{}]", schedule.flow, schedule.schedule)),
                style.cyan(&schedule.cron),
                style.dim(&format!("{} ({})", schedule.description, schedule.timezone))
            ));
            for next in &schedule.next {
                text.push_str(&format!("  {next}\n"));
            }
        }
        for (flow, problems) in &broken {
            for problem in problems.iter() {
                text.push_str(&format!("{} {flow}: {problem}\n", style.red("error:")));
            }
        }
        output::out(&text)?;
    }
    Ok(if broken.is_empty() {
        Exit::Success
    } else {
        Exit::Failure
    })
}
