//! The crontab grammar RES accepts, checked field by field so an error names the field and
//! the item that is wrong. Croner accepts more (`L`, `W`, `#`, `+`, `?`, a year field) and
//! reports errors without saying which field failed; this layer narrows the language to
//! standard crontab and turns names into numbers so croner's parser only sees plain fields.

use std::fmt;

use super::day_specials::{DaySpecials, Special};

/// One of the six cron fields, in the order they appear in a 6-field expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldKind {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
    /// Quartz's optional seventh field.
    Year,
}

impl FieldKind {
    /// All fields in 6-field order.
    pub(crate) const ALL: [FieldKind; 6] = [
        FieldKind::Second,
        FieldKind::Minute,
        FieldKind::Hour,
        FieldKind::DayOfMonth,
        FieldKind::Month,
        FieldKind::DayOfWeek,
    ];

    /// Smallest value the field accepts.
    pub(crate) fn min(self) -> u16 {
        match self {
            FieldKind::DayOfMonth | FieldKind::Month => 1,
            FieldKind::Year => 1970,
            _ => 0,
        }
    }

    /// Largest value the field accepts (7 is Sunday again in day-of-week).
    pub(crate) fn max(self) -> u16 {
        match self {
            FieldKind::Second | FieldKind::Minute => 59,
            FieldKind::Hour => 23,
            FieldKind::DayOfMonth => 31,
            FieldKind::Month => 12,
            FieldKind::DayOfWeek => 7,
            // EventBridge's last year (Quartz stops at 2099).
            FieldKind::Year => 2199,
        }
    }

    /// The widest step that still selects more than the first value of the field.
    fn max_step(self) -> u16 {
        match self {
            // 0-7 names Sunday twice, so the span of distinct days is 0-6.
            FieldKind::DayOfWeek => 6,
            _ => self.max() - self.min(),
        }
    }

    fn names(self) -> &'static [&'static str] {
        match self {
            FieldKind::Month => &[
                "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
            ],
            FieldKind::DayOfWeek => &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
            _ => &[],
        }
    }
}

impl fmt::Display for FieldKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FieldKind::Second => "second",
            FieldKind::Minute => "minute",
            FieldKind::Hour => "hour",
            FieldKind::DayOfMonth => "day-of-month",
            FieldKind::Month => "month",
            FieldKind::DayOfWeek => "day-of-week",
            FieldKind::Year => "year",
        })
    }
}

/// An expression split into its six fields, each normalised to digits, `*`, `,`, `-` and `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NormalizedFields {
    /// Fields in 6-field order; a 5-field expression gets `0` seconds.
    pub(crate) fields: [String; 6],
    /// The day fields' `L`, `W` and `#` items (also written in `fields`).
    pub(crate) specials: DaySpecials,
    /// The seventh field, when given.
    pub(crate) year: Option<String>,
}

/// Splits and checks an expression; the error text is the reason, without the expression.
pub(crate) fn normalize(expression: &str) -> Result<NormalizedFields, String> {
    let trimmed = expression.trim();
    if trimmed.is_empty() {
        return Err("the expression is empty".to_owned());
    }
    let expanded = if trimmed.starts_with('@') {
        expand_macro(trimmed)?
    } else {
        trimmed
    };
    let parts: Vec<&str> = expanded.split_whitespace().collect();
    let (six, year): ([&str; 6], Option<&str>) = match parts.as_slice() {
        [m, h, dom, mon, dow] => (["0", m, h, dom, mon, dow], None),
        [s, m, h, dom, mon, dow] => ([s, m, h, dom, mon, dow], None),
        [s, m, h, dom, mon, dow, year] => ([s, m, h, dom, mon, dow], Some(year)),
        other => {
            return Err(format!(
                "expected 5 fields (minute hour day-of-month month day-of-week), 6 with a \
                 leading seconds field, or 7 with seconds and a trailing year, found {}",
                other.len()
            ));
        }
    };
    let mut fields: [String; 6] = Default::default();
    let mut specials = DaySpecials::default();
    for ((slot, kind), text) in fields.iter_mut().zip(FieldKind::ALL).zip(six) {
        *slot = normalize_field_with(kind, text, Some(&mut specials))?;
    }
    let year = year
        .map(|text| normalize_field(FieldKind::Year, text))
        .transpose()?
        .filter(|year| year != "*");
    Ok(NormalizedFields {
        fields,
        specials,
        year,
    })
}

fn expand_macro(text: &str) -> Result<&'static str, String> {
    match text.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => Ok("0 0 1 1 *"),
        "@monthly" => Ok("0 0 1 * *"),
        "@weekly" => Ok("0 0 * * 0"),
        "@daily" | "@midnight" => Ok("0 0 * * *"),
        "@hourly" => Ok("0 * * * *"),
        _ => Err(format!(
            "unknown macro '{text}' (use @hourly, @daily, @weekly, @monthly or @yearly)"
        )),
    }
}

/// Checks one field and turns its names into numbers; the error names the field. The day
/// fields' `L`, `W` and `#` items are refused here (an interval's `on` days).
pub(crate) fn normalize_field(kind: FieldKind, text: &str) -> Result<String, String> {
    normalize_field_with(kind, text, None)
}

fn normalize_field_with(
    kind: FieldKind,
    text: &str,
    mut specials: Option<&mut DaySpecials>,
) -> Result<String, String> {
    let mut items = Vec::new();
    let listed = text.contains(',');
    for item in text.split(',') {
        if item.is_empty() {
            return Err(format!("{kind} '{text}' has an empty list item"));
        }
        // crontab reads `*,0` as every value, yet counts the field as unrestricted only
        // when it starts with `*`; croner refuses it. No agreed meaning: refused.
        if listed && (item == "*" || item == "?") {
            return Err(format!(
                "{kind} '{text}': '{item}' means any value and stands alone, not as an item of a list"
            ));
        }
        let special = match (kind, specials.as_deref_mut()) {
            (FieldKind::DayOfMonth, Some(specials)) => {
                specials.day_of_month_item(item, |day| parse_value(kind, item, day, false))?
            }
            (FieldKind::DayOfWeek, Some(specials)) => {
                specials.day_of_week_item(item, |day| parse_value(kind, item, day, false))?
            }
            _ => Special::Plain,
        };
        items.push(match special {
            Special::Item(canonical) => canonical,
            Special::Plain => normalize_item(kind, item)?,
        });
    }
    Ok(items.join(","))
}

/// The items of a normalised field that croner's plain parser reads (without `L`, `W`, `#`).
pub(crate) fn plain_items(field: &str) -> String {
    field
        .split(',')
        .filter(|item| !item.contains(['L', 'W', '#']))
        .collect::<Vec<_>>()
        .join(",")
}

fn normalize_item(kind: FieldKind, item: &str) -> Result<String, String> {
    if item == "?" {
        // Quartz's and EventBridge's "no specific value", croner's alias of `*`.
        return match kind {
            FieldKind::DayOfMonth | FieldKind::DayOfWeek => Ok("*".to_owned()),
            _ => Err(format!(
                "{kind} '?': '?' (any) is only allowed in day-of-month and day-of-week"
            )),
        };
    }
    let (base, step) = match item.split_once('/') {
        Some((base, step)) => (base, Some(parse_step(kind, item, step)?)),
        None => (item, None),
    };
    let base = if base == "*" {
        "*".to_owned()
    } else if let Some((start, end)) = base.split_once('-') {
        let start = parse_value(kind, item, start, false)?;
        let end = parse_value(kind, item, end, true)?;
        if start > end {
            return Err(format!(
                "{kind} range '{item}' runs backwards (start {start} is after end {end})"
            ));
        }
        format!("{start}-{end}")
    } else {
        let value = parse_value(kind, item, base, false)?;
        match step {
            // A start and a step (`0/15`, `5/15`): from the start to the field's end, as
            // croner, Quartz and robfig/cron read it. Written as a range, not `*`, so a
            // restricted day field stays restricted (ORed with the other day field).
            Some(_) => format!("{value}-{}", kind.max()),
            None => value.to_string(),
        }
    };
    Ok(match step {
        Some(step) => format!("{base}/{step}"),
        None => base,
    })
}

fn parse_step(kind: FieldKind, item: &str, step: &str) -> Result<u16, String> {
    let value: u16 = parse_number(step)
        .ok_or_else(|| format!("{kind} '{item}': step '{step}' is not a number"))?;
    if value == 0 {
        return Err(format!("{kind} step must be >= 1"));
    }
    let max_step = kind.max_step();
    if value > max_step {
        return Err(format!(
            "{kind} step {value} is larger than {max_step}, the widest step a {kind} field can \
             take ('*/{value}' would select only the first {kind}, not every {value})"
        ));
    }
    Ok(value)
}

/// Parses a number or a name; `range_end` lets `SUN` close a range as 7 (`FRI-SUN`).
fn parse_value(kind: FieldKind, item: &str, text: &str, range_end: bool) -> Result<u16, String> {
    if text.is_empty() {
        return Err(format!("{kind} '{item}' is missing a value"));
    }
    if let Some(value) = parse_number(text) {
        let (min, max) = (kind.min(), kind.max());
        if value < min || value > max {
            return Err(format!("{kind} {value} is out of range {min}-{max}"));
        }
        return Ok(value);
    }
    if let Some(index) = kind
        .names()
        .iter()
        .position(|name| name.eq_ignore_ascii_case(text))
    {
        // Positions are small (< 12), so the cast cannot truncate.
        let index = index as u16;
        return Ok(match kind {
            FieldKind::Month => index + 1,
            FieldKind::DayOfWeek if range_end && index == 0 => 7,
            _ => index,
        });
    }
    Err(describe_bad_value(kind, item, text))
}

fn describe_bad_value(kind: FieldKind, item: &str, text: &str) -> String {
    const EXTENSIONS: [char; 5] = ['L', 'W', '#', '?', '+'];
    if let Some(ch) = text
        .chars()
        .find(|c| EXTENSIONS.contains(&c.to_ascii_uppercase()))
    {
        let hint = match ch.to_ascii_uppercase() {
            'L' => "L is allowed in day-of-month (L, LW) and day-of-week (5L)",
            'W' => "W is allowed in day-of-month (15W, LW)",
            '#' => "# is allowed in day-of-week (MON#2)",
            '?' => "? is allowed as a whole day-of-month or day-of-week field",
            _ => "croner's + prefix is not supported: day-of-month and day-of-week are ORed",
        };
        return format!("{kind} '{item}': '{ch}' is not supported here ({hint})");
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        // Too long for parse_number: far past any field's maximum.
        return format!(
            "{kind} '{item}': {text} is out of range {}-{}",
            kind.min(),
            kind.max()
        );
    }
    if text.eq_ignore_ascii_case("H") || text.eq_ignore_ascii_case("R") {
        return format!(
            "{kind} '{item}': hashed and random values (H, R) are not supported; \
             a rule's jitter_seconds spreads its runs instead"
        );
    }
    if text.chars().all(|c| c.is_ascii_alphabetic()) {
        return match kind {
            FieldKind::Month => format!("{kind} '{item}': '{text}' is not a month name (JAN-DEC)"),
            FieldKind::DayOfWeek => {
                format!("{kind} '{item}': '{text}' is not a weekday name (SUN-SAT)")
            }
            _ => format!("{kind} '{item}': names are only allowed in month and day-of-week"),
        };
    }
    format!("{kind} '{item}': '{text}' is not a number")
}

fn parse_number(text: &str) -> Option<u16> {
    // `u16::from_str` accepts a leading '+', which is not cron syntax.
    if text.is_empty() || text.len() > 4 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(expression: &str) -> String {
        match normalize(expression) {
            Ok(fields) => panic!("'{expression}' was accepted as {fields:?}"),
            Err(reason) => reason,
        }
    }

    fn fields(expression: &str) -> [String; 6] {
        match normalize(expression) {
            Ok(normalized) => normalized.fields,
            Err(reason) => panic!("'{expression}' was rejected: {reason}"),
        }
    }

    #[test]
    fn five_fields_get_zero_seconds() {
        assert_eq!(fields("*/30 * * * *"), ["0", "*/30", "*", "*", "*", "*"]);
    }

    #[test]
    fn six_fields_keep_their_seconds() {
        assert_eq!(fields("15 0 9 * * *")[0], "15");
    }

    #[test]
    fn names_become_numbers_in_their_own_fields() {
        let f = fields("0 9 * jan-Mar,DEC MON-FRI,sun");
        assert_eq!(f[4], "1-3,12");
        assert_eq!(f[5], "1-5,0");
    }

    #[test]
    fn sunday_closes_a_range_as_seven() {
        assert_eq!(fields("0 9 * * FRI-SUN")[5], "5-7");
        assert_eq!(fields("0 9 * * SUN-TUE")[5], "0-2");
    }

    #[test]
    fn macros_expand() {
        assert_eq!(fields("@hourly"), fields("0 * * * *"));
        assert_eq!(fields("@DAILY"), fields("0 0 * * *"));
        assert_eq!(fields("@weekly"), fields("0 0 * * 0"));
        assert_eq!(fields("@monthly"), fields("0 0 1 * *"));
        assert_eq!(fields("@yearly"), fields("0 0 1 1 *"));
        assert_eq!(fields("@annually"), fields("@yearly"));
        assert!(reason("@reboot").contains("unknown macro '@reboot'"));
    }

    #[test]
    fn step_zero_names_the_field() {
        assert_eq!(reason("*/0 * * * *"), "minute step must be >= 1");
        assert_eq!(reason("0 */0 * * *"), "hour step must be >= 1");
    }

    #[test]
    fn oversized_steps_are_explained() {
        assert!(reason("*/90 * * * *").starts_with("minute step 90 is larger than 59"));
        assert!(reason("0 0 * * */7").starts_with("day-of-week step 7 is larger than 6"));
    }

    #[test]
    fn out_of_range_values_name_field_and_bounds() {
        assert_eq!(reason("60 * * * *"), "minute 60 is out of range 0-59");
        assert_eq!(reason("0 25 * * *"), "hour 25 is out of range 0-23");
        assert_eq!(reason("0 0 0 * *"), "day-of-month 0 is out of range 1-31");
        assert_eq!(reason("0 0 * 13 *"), "month 13 is out of range 1-12");
        assert_eq!(reason("0 0 * * 8"), "day-of-week 8 is out of range 0-7");
        assert_eq!(reason("60 0 0 * * *"), "second 60 is out of range 0-59");
    }

    #[test]
    fn structural_errors_are_specific() {
        assert!(reason("* * * *").contains("found 4"));
        assert!(reason("* * * * * * * *").contains("found 8"));
        assert_eq!(reason(""), "the expression is empty");
        assert_eq!(reason("   "), "the expression is empty");
        assert!(reason("10-5 * * * *").contains("runs backwards"));
        assert!(reason("1,,2 * * * *").contains("empty list item"));
        assert!(reason("0-10000000 * * * *").contains("10000000 is out of range 0-59"));
        assert!(reason("H * * * *").contains("minute 'H': hashed and random values"));
        assert!(reason("0 R * * *").contains("hour 'R': hashed and random values"));
        assert_eq!(
            reason("* * * * *,0"),
            "day-of-week '*,0': '*' means any value and stands alone, not as an item of a list"
        );
        assert!(reason("0 0 ?,5 * *").contains("day-of-month '?,5': '?' means any value"));
        assert!(reason("1- * * * *").contains("missing a value"));
        assert!(reason("*/x * * * *").contains("step 'x' is not a number"));
        assert!(reason("+5 * * * *").contains("not supported"));
        assert!(reason("abc * * * *").contains("names are only allowed"));
        assert!(reason("0 MON * * *").contains("names are only allowed"));
        assert!(reason("0 0 * FOO *").contains("not a month name"));
        assert!(reason("0 0 * * FUN").contains("not a weekday name"));
    }

    #[test]
    fn any_is_a_star_in_the_day_fields_only() {
        assert_eq!(fields("0 9 ? * MON-FRI"), fields("0 9 * * MON-FRI"));
        assert_eq!(fields("0 9 15 * ?"), fields("0 9 15 * *"));
        assert_eq!(
            reason("? * * * *"),
            "minute '?': '?' (any) is only allowed in day-of-month and day-of-week"
        );
        assert!(reason("0 ? * * *").starts_with("hour '?'"));
    }

    #[test]
    fn a_start_with_a_step_runs_to_the_end_of_the_field() {
        assert_eq!(fields("0/15 * * * *")[1], "0-59/15");
        assert_eq!(fields("5/15 * * * *")[1], "5-59/15");
        assert_eq!(fields("0 8/2 * * *")[2], "8-23/2");
        assert_eq!(fields("0 0 1/10 * *")[3], "1-31/10");
        assert_eq!(fields("0 0 * 2/3 *")[4], "2-12/3");
        assert_eq!(fields("0 0 * * MON/2")[5], "1-7/2");
        assert_eq!(fields("10/20 * * * * *")[0], "10-59/20");
        assert!(reason("5/0 * * * *").contains("step must be >= 1"));
        assert!(reason("5/90 * * * *").contains("larger than 59"));
    }

    #[test]
    fn a_seventh_field_is_the_year() {
        let normalized = normalize("0 0 12 1 1 ? 2030-2035/5").expect("valid");
        assert_eq!(normalized.year.as_deref(), Some("2030-2035/5"));
        assert_eq!(normalize("0 0 12 1 1 ? *").expect("valid").year, None);
        assert_eq!(
            reason("0 0 12 1 1 ? 1969"),
            "year 1969 is out of range 1970-2199"
        );
        assert_eq!(
            reason("0 0 12 1 1 ? 2200"),
            "year 2200 is out of range 1970-2199"
        );
        assert!(reason("0 0 12 1 1 ? 2031-2030").contains("runs backwards"));
    }

    #[test]
    fn croner_day_extensions_are_written_canonically() {
        assert_eq!(fields("0 0 L * *")[3], "L");
        assert_eq!(fields("0 0 lw * *")[3], "LW");
        assert_eq!(fields("0 0 1,15W,L * *")[3], "1,15W,L");
        assert_eq!(fields("0 0 * * FRIL")[5], "5L");
        assert_eq!(fields("0 0 * * 7L")[5], "0L");
        assert_eq!(fields("0 0 * * MON#2,fri#5")[5], "1#2,5#5");
        assert!(reason("0 0 32W * *").contains("day-of-month 32 is out of range 1-31"));
        assert!(reason("0 0 * * FUN#1").contains("'FUN' is not a weekday name"));
    }

    #[test]
    fn extensions_outside_their_field_are_refused_by_name() {
        for (expression, hint) in [
            ("0 0 * * 15W", "W is allowed in day-of-month"),
            (
                "0 L * * *",
                "L is allowed in day-of-month (L, LW) and day-of-week (5L)",
            ),
            ("0 0 5#2 * *", "# is allowed in day-of-week"),
            ("0 0 1 * +1", "+ prefix is not supported"),
        ] {
            let reason = reason(expression);
            assert!(
                reason.contains("is not supported here") && reason.contains(hint),
                "{expression}: {reason}"
            );
        }
    }
}
