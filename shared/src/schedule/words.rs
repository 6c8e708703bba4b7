//! Schedules and blockers in words, for people: the functions' `rules_describe`, the
//! runner's `plan why` and status page, and `resctl` all say the same thing.

use chrono::{DateTime, SecondsFormat, Utc};

use super::cron::syntax;
use super::interval::{IntervalSchedule, every_in_words};
use super::readiness::Blocker;
use super::window::OperationWindow;
use super::zone::Zone;

/// A schedule in words: "every 30 minutes, 08:00–18:00 Asia/Riyadh, on weekdays". Common
/// shapes are spelled out; anything else is quoted as its cron expression.
pub fn describe_schedule(cron: &str, window: Option<&OperationWindow>, zone: Zone) -> String {
    if IntervalSchedule::is_interval(cron) {
        return match IntervalSchedule::parse(cron) {
            Ok(interval) => interval_in_words(&interval, window, zone),
            Err(_) => format!("on the interval \"{}\" {}", cron.trim(), zone.name()),
        };
    }
    // What the words cannot say is quoted once, plainly: callers show the schedule as text.
    let when = syntax::normalize(cron)
        .ok()
        .filter(|n| n.year.is_none())
        .and_then(|n| cron_in_words(&n.fields))
        .unwrap_or_else(|| format!("on the cron schedule \"{}\"", cron.trim()));
    let window = match window {
        Some(w) => format!(", {w}"),
        None => String::new(),
    };
    format!("{when}{window} {}", zone.name())
}

/// "every 90 minutes from each opening, on weekdays, 08:00–18:00 Asia/Riyadh".
fn interval_in_words(
    interval: &IntervalSchedule,
    window: Option<&OperationWindow>,
    zone: Zone,
) -> String {
    let every = every_in_words(interval.every().num_seconds());
    let when = match window {
        Some(w) if interval.once_per_window(w) => format!(
            "once at each opening (the interval, {}, is at least as long as the window)",
            every.trim_start_matches("every ")
        ),
        Some(_) => format!("{every} from each opening"),
        None => format!("{every} from midnight"),
    };
    let days = match interval.weekdays() {
        0x7f => String::new(),
        mask => format!(", {}", days_in_words(mask)),
    };
    let window = match window {
        Some(w) => format!(", {w}"),
        None => String::new(),
    };
    format!("{when}{days}{window} {}", zone.name())
}

/// Weekdays from a mask (bit 0 = Sunday), Monday first: "on weekdays", "on Friday, Saturday".
fn days_in_words(mask: u8) -> String {
    match mask {
        0b011_1110 => "on weekdays".into(),
        0b100_0001 => "on weekends".into(),
        _ => {
            let days: Vec<&str> = [1, 2, 3, 4, 5, 6, 0]
                .into_iter()
                .filter(|d| mask & (1 << d) != 0)
                .filter_map(|d| WEEKDAY_NAMES.get(d).copied())
                .collect();
            format!("on {}", days.join(", "))
        }
    }
}

const WEEKDAY_NAMES: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A time relative to `now` in a few words: "in 3 min", "2 h ago", "now" (resctl's tables
/// and the console say it alike).
pub fn relative_time(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let seconds = (t - now).num_seconds();
    let span = seconds.unsigned_abs();
    let amount = match span {
        0..=9 => return "now".to_owned(),
        10..=59 => format!("{span} s"),
        60..=3_599 => format!("{} min", span / 60),
        3_600..=172_799 => format!("{} h", span / 3_600),
        _ => format!("{} d", span / 86_400),
    };
    if seconds > 0 {
        format!("in {amount}")
    } else {
        format!("{amount} ago")
    }
}

/// A readiness blocker in a few words, times in UTC (`plan why`, the runner's status page).
pub fn describe_blocker(blocker: &Blocker) -> String {
    blocker_in_words(blocker, |t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// A readiness blocker in a few words, times on the branch's clock with its zone
/// (`rules_describe`, the console): "due 2026-11-25 12:30 Asia/Riyadh".
pub fn describe_blocker_in(blocker: &Blocker, zone: Zone) -> String {
    blocker_in_words(blocker, |t| zone.wall_clock(*t))
}

fn blocker_in_words(blocker: &Blocker, time: impl Fn(&DateTime<Utc>) -> String) -> String {
    match blocker {
        Blocker::Inactive => "branch rule inactive".into(),
        Blocker::Archived => "archived".into(),
        Blocker::ForceStopped => "force-stopped".into(),
        Blocker::PausedByOperator => "paused by an operator".into(),
        Blocker::AlreadyRunning => "running".into(),
        Blocker::BranchInactive => "branch inactive".into(),
        Blocker::RuleNotActive { status } => format!("rule is {}", status.as_str()),
        Blocker::NotDue { next_run_time } => format!("due {}", time(next_run_time)),
        Blocker::Paused { resume_at } => format!("paused until {}", time(resume_at)),
        Blocker::OutsideWindow { next_start } => match next_start {
            Some(at) => format!("window opens {}", time(at)),
            None => "outside window".into(),
        },
    }
}

fn cron_in_words(fields: &[String; 6]) -> Option<String> {
    let [second, minute, hour, dom, month, dow] = fields.each_ref().map(String::as_str);
    if month != "*" {
        return None;
    }
    let time = match second {
        "0" => time_in_words(minute, hour)?,
        // Seconds-level schedules are said only when they run all day, every minute.
        second if minute == "*" && hour == "*" => Time::Every(seconds_in_words(second)?),
        _ => return None,
    };
    let weekday = |dow: &str| weekdays_in_words(dow).or_else(|| nth_weekday_in_words(dow));
    let days = match (dom, dow) {
        ("*", "*") => None,
        ("*", dow) => Some(weekday(dow)?),
        (dom, "*") => Some(month_day_in_words(dom)?),
        // Both given: cron runs on either (day 15, and every Friday).
        (dom, dow) => Some(format!(
            "{} and {}",
            month_day_in_words(dom)?,
            weekday(dow)?
        )),
    };
    Some(match (days, time) {
        (None, Time::At(at)) => format!("daily at {at}"),
        (None, Time::Every(every)) => every,
        (Some(days), Time::At(at)) => format!("{days} at {at}"),
        (Some(days), Time::Every(every)) => format!("{every}, {days}"),
    })
}

enum Time {
    /// "08:00" or "08:00 and 14:30".
    At(String),
    /// "every 30 minutes".
    Every(String),
}

fn time_in_words(minute: &str, hour: &str) -> Option<Time> {
    let step = |field: &str| {
        field
            .strip_prefix("*/")
            .or_else(|| field.strip_prefix("0-59/"))
            .or_else(|| field.strip_prefix("0-23/"))
            .and_then(|n| n.parse::<u32>().ok())
    };
    let plural = |n: u32, unit: &str| {
        if n == 1 {
            format!("every {unit}")
        } else {
            format!("every {n} {unit}s")
        }
    };
    match (minute, hour) {
        ("*", "*") => Some(Time::Every("every minute".into())),
        (m, "*") if step(m).is_some() => step(m).map(|n| Time::Every(plural(n, "minute"))),
        (m, "*") => number(m).map(|m| Time::Every(format!("every hour at :{m:02}"))),
        (m, h) if step(h).is_some() => {
            let (m, n) = (number(m)?, step(h)?);
            Some(Time::Every(format!("{} at :{m:02}", plural(n, "hour"))))
        }
        (m, h) => {
            let m = number(m)?;
            let hours: Option<Vec<String>> = h
                .split(',')
                .map(|h| number(h).map(|h| format!("{h:02}:{m:02}")))
                .collect();
            let hours = hours?;
            match hours.as_slice() {
                [] => None,
                [one] => Some(Time::At(one.clone())),
                [init @ .., last] => Some(Time::At(format!("{} and {last}", init.join(", ")))),
            }
        }
    }
}

/// `*`, `*/5` or `0-59/5` in the seconds field: "every second", "every 5 seconds".
fn seconds_in_words(second: &str) -> Option<String> {
    if second == "*" {
        return Some("every second".into());
    }
    let step = second
        .strip_prefix("*/")
        .or_else(|| second.strip_prefix("0-59/"))
        .or_else(|| second.strip_prefix("0/"))
        .and_then(number)?;
    Some(match step {
        1 => "every second".into(),
        n => format!("every {n} seconds"),
    })
}

fn weekdays_in_words(dow: &str) -> Option<String> {
    match dow {
        "1-5" => return Some("on weekdays".into()),
        "0,6" | "6,0" | "6,7" => return Some("on weekends".into()),
        _ => {}
    }
    let days: Option<Vec<&str>> = dow
        .split(',')
        .map(|d| number(d).and_then(|d| WEEKDAY_NAMES.get(d as usize % 7).copied()))
        .collect();
    Some(format!("on {}", days?.join(", ")))
}

/// `15`, `L`, `LW`, `15W` as words.
fn month_day_in_words(dom: &str) -> Option<String> {
    Some(match dom {
        "L" => "on the last day of the month".to_owned(),
        "LW" => "on the last weekday of the month".to_owned(),
        d => match d.strip_suffix('W') {
            Some(n) => format!("on the weekday nearest day {} of the month", number(n)?),
            None => format!("on day {} of the month", number(d)?),
        },
    })
}

/// `5L` and `1#2` as words: "on the last Friday of the month", "on the 2nd Monday …".
fn nth_weekday_in_words(dow: &str) -> Option<String> {
    const ORDINALS: [&str; 5] = ["1st", "2nd", "3rd", "4th", "5th"];
    let (weekday, which) = match (dow.strip_suffix('L'), dow.split_once('#')) {
        (Some(w), _) => (w, "last"),
        (None, Some((w, k))) => (w, *ORDINALS.get(number(k)?.checked_sub(1)? as usize)?),
        (None, None) => return None,
    };
    let name = WEEKDAY_NAMES.get(number(weekday)? as usize % 7)?;
    Some(format!("on the {which} {name} of the month"))
}

fn number(field: &str) -> Option<u32> {
    field.parse().ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn words(cron: &str, window: Option<(&str, &str)>) -> String {
        let window = window
            .and_then(|(from, to)| OperationWindow::parse(Some(from), Some(to)).ok().flatten());
        describe_schedule(cron, window.as_ref(), Zone::DEFAULT)
    }

    #[test]
    fn times_read_relative_to_now() {
        let now = Utc::now();
        assert_eq!(
            relative_time(now + chrono::TimeDelta::seconds(3), now),
            "now"
        );
        assert_eq!(
            relative_time(now + chrono::TimeDelta::minutes(3), now),
            "in 3 min"
        );
        assert_eq!(
            relative_time(now - chrono::TimeDelta::hours(2), now),
            "2 h ago"
        );
        assert_eq!(
            relative_time(now - chrono::TimeDelta::days(3), now),
            "3 d ago"
        );
    }

    #[test]
    fn common_schedules_read_as_people_say_them() {
        assert_eq!(
            words("*/30 * * * *", Some(("08:00", "18:00"))),
            "every 30 minutes, 08:00–18:00 Asia/Riyadh"
        );
        assert_eq!(
            words("*/15 * * * 1-5", None),
            "every 15 minutes, on weekdays Asia/Riyadh"
        );
        assert_eq!(words("0 9 * * *", None), "daily at 09:00 Asia/Riyadh");
        assert_eq!(
            words("30 8,14 * * *", None),
            "daily at 08:30 and 14:30 Asia/Riyadh"
        );
        assert_eq!(words("5 * * * *", None), "every hour at :05 Asia/Riyadh");
        assert_eq!(
            words("0 */2 * * *", None),
            "every 2 hours at :00 Asia/Riyadh"
        );
        assert_eq!(
            words("0 7 1 * *", None),
            "on day 1 of the month at 07:00 Asia/Riyadh"
        );
        assert_eq!(
            words("0 7 * * 1,3", None),
            "on Monday, Wednesday at 07:00 Asia/Riyadh"
        );
        assert_eq!(words("@daily", None), "daily at 00:00 Asia/Riyadh");
        assert_eq!(words("0/15 * * * ?", None), "every 15 minutes Asia/Riyadh");
        assert_eq!(
            words("0 9 L * *", None),
            "on the last day of the month at 09:00 Asia/Riyadh"
        );
        assert_eq!(
            words("0 9 LW * *", None),
            "on the last weekday of the month at 09:00 Asia/Riyadh"
        );
        assert_eq!(
            words("0 9 15W * *", None),
            "on the weekday nearest day 15 of the month at 09:00 Asia/Riyadh"
        );
        assert_eq!(
            words("0 9 * * FRIL", None),
            "on the last Friday of the month at 09:00 Asia/Riyadh"
        );
        assert_eq!(
            words("0 9 * * MON#2", None),
            "on the 2nd Monday of the month at 09:00 Asia/Riyadh"
        );
        assert_eq!(
            words("0 0 0/2 ? * *", None),
            "every 2 hours at :00 Asia/Riyadh"
        );
    }

    #[test]
    fn intervals_read_from_their_anchor() {
        assert_eq!(
            words("@every 90m", Some(("08:00", "18:00"))),
            "every 90 minutes from each opening, 08:00–18:00 Asia/Riyadh"
        );
        assert_eq!(
            words("@every 1h on mon-fri", None),
            "every hour from midnight, on weekdays Asia/Riyadh"
        );
        assert_eq!(
            words("@every 45s on fri,sat", Some(("22:00", "02:00"))),
            "every 45 seconds from each opening, on Friday, Saturday, 22:00–02:00 Asia/Riyadh"
        );
        assert_eq!(
            words("@every 3h", Some(("08:00", "10:00"))),
            "once at each opening (the interval, 3 hours, is at least as long as the window), \
             08:00–10:00 Asia/Riyadh"
        );
        assert_eq!(
            words("@every 0m", None),
            "on the interval \"@every 0m\" Asia/Riyadh"
        );
    }

    #[test]
    fn seconds_and_both_day_fields_read_as_sentences() {
        assert_eq!(words("*/5 * * * * *", None), "every 5 seconds Asia/Riyadh");
        assert_eq!(words("* * * * * *", None), "every second Asia/Riyadh");
        assert_eq!(
            words("*/10 * * * * 1-5", None),
            "every 10 seconds, on weekdays Asia/Riyadh"
        );
        assert_eq!(
            words("0 9 15 * FRI", None),
            "on day 15 of the month and on Friday at 09:00 Asia/Riyadh"
        );
    }

    #[test]
    fn anything_else_is_quoted_once_not_guessed() {
        assert_eq!(
            words("0 9 * 1 *", None),
            "on the cron schedule \"0 9 * 1 *\" Asia/Riyadh"
        );
        assert_eq!(
            words("15 * 9 * * *", None),
            "on the cron schedule \"15 * 9 * * *\" Asia/Riyadh"
        );
        assert_eq!(
            words("0 0 9 * * * 2027", None),
            "on the cron schedule \"0 0 9 * * * 2027\" Asia/Riyadh"
        );
        assert_eq!(
            words("not a cron", None),
            "on the cron schedule \"not a cron\" Asia/Riyadh"
        );
    }

    fn field(choices: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
        proptest::sample::select(choices)
    }

    prop_compose! {
        fn any_cron()(
            second in field(&["", "0 ", "* ", "*/5 ", "15 ", "0,30 ", "10-20/5 "]),
            minute in field(&["*", "*/15", "5", "0,30", "10-20", "0/20"]),
            hour in field(&["*", "9", "*/2", "8,14", "9-17", "22-2"]),
            dom in field(&["*", "15", "L", "LW", "15W", "1,15", "?", "1-7"]),
            month in field(&["*", "1", "*/3", "JAN-MAR"]),
            dow in field(&["*", "1-5", "FRI", "5L", "MON#2", "0,6", "?", "SUN-THU"]),
            year in field(&["", " 2027", " *"]),
        ) -> String {
            format!("{second}{minute} {hour} {dom} {month} {dow}{year}")
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// Whatever the parser accepts reads as a sentence or one plain quote of the
        /// expression: never markup, never the expression twice, the zone once.
        #[test]
        fn every_accepted_cron_reads_cleanly(cron in any_cron()) {
            prop_assume!(syntax::normalize(&cron).is_ok());
            let text = describe_schedule(&cron, None, Zone::DEFAULT);
            let quoted = text.contains(&format!("\"{cron}\""));
            // A sentence holds no cron syntax; a quote holds it once.
            for markup in ['<', '>', '*'] {
                prop_assert!(quoted || !text.contains(markup), "{cron}: {text}");
            }
            prop_assert!(!text.contains('`'), "{cron}: {text}");
            prop_assert!(text.matches(cron.as_str()).count() <= 1, "{cron}: {text}");
            prop_assert_eq!(text.matches("Asia/Riyadh").count(), 1, "{}: {}", cron, text);
        }
    }
}
