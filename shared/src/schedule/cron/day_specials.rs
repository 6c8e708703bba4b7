//! The day rules croner, Quartz and EventBridge add to crontab: `L` (the last day of the
//! month), `LW` (its last weekday), `15W` (the weekday nearest the 15th, never leaving the
//! month), `5L` (the month's last Friday) and `MON#2` (its second Monday). Each depends on
//! the month, so they are kept apart from the plain field masks and turned into a bitmask
//! of the month's days when a month is searched.

/// The special items of the day-of-month and day-of-week fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DaySpecials {
    /// `L` in day-of-month.
    last_day: bool,
    /// `LW` in day-of-month.
    last_weekday: bool,
    /// Bit `d` for each `dW` in day-of-month.
    nearest: u64,
    /// Per weekday (Sunday = 0), bit `k - 1` for each `w#k`.
    nth: [u8; 7],
    /// Bit `w` for each `wL` in day-of-week.
    last_of: u8,
}

/// What a day-field item is, when it is special.
pub(crate) enum Special {
    /// A special item, written canonically (`L`, `LW`, `15W`, `5L`, `1#2`).
    Item(String),
    /// An ordinary item (a number, range, step or `*`).
    Plain,
}

impl DaySpecials {
    /// Whether day-of-month has a special item.
    pub(crate) fn in_day_of_month(&self) -> bool {
        self.last_day || self.last_weekday || self.nearest != 0
    }

    /// Whether day-of-week has a special item.
    pub(crate) fn in_day_of_week(&self) -> bool {
        self.last_of != 0 || self.nth.iter().any(|n| *n != 0)
    }

    /// Reads a day-of-month item; `day` parses a day number (with the field's errors).
    pub(crate) fn day_of_month_item(
        &mut self,
        item: &str,
        day: impl Fn(&str) -> Result<u16, String>,
    ) -> Result<Special, String> {
        let upper = item.to_ascii_uppercase();
        if upper == "L" {
            self.last_day = true;
            return Ok(Special::Item("L".to_owned()));
        }
        if upper == "LW" || upper == "WL" {
            self.last_weekday = true;
            return Ok(Special::Item("LW".to_owned()));
        }
        if upper.starts_with("L-") {
            return Err(format!(
                "day-of-month '{item}': offsets before the last day (L-n) are not supported; \
                 L is the last day of the month"
            ));
        }
        if let Some(number) = upper.strip_suffix('W') {
            if number.is_empty() || number.contains(['-', '/', '*']) {
                return Err(format!(
                    "day-of-month '{item}': W takes one day number before it (15W, the weekday \
                     nearest the 15th) or L (LW, the last weekday)"
                ));
            }
            let value = day(number)?;
            self.nearest |= 1 << value;
            return Ok(Special::Item(format!("{value}W")));
        }
        Ok(Special::Plain)
    }

    /// Reads a day-of-week item; `weekday` parses a weekday number or name.
    pub(crate) fn day_of_week_item(
        &mut self,
        item: &str,
        weekday: impl Fn(&str) -> Result<u16, String>,
    ) -> Result<Special, String> {
        let upper = item.to_ascii_uppercase();
        if upper == "L" {
            return Err(format!(
                "day-of-week '{item}': a bare L has no agreed meaning (Quartz reads it as \
                 Saturday); write 5L for the last Friday of the month, or 6 for Saturdays"
            ));
        }
        let one_weekday = |base: &str| {
            if base.is_empty() || base.contains(['-', '/', '*', ',']) {
                Err(format!(
                    "day-of-week '{item}': L and # take one weekday before them (5L, MON#2), \
                     not a range or a step"
                ))
            } else {
                // 7 is Sunday again.
                weekday(base).map(|w| w % 7)
            }
        };
        if let Some((base, nth)) = upper.split_once('#') {
            let w = one_weekday(base)?;
            if nth == "L" {
                // Croner's other spelling of `5L`.
                self.last_of |= 1 << w;
                return Ok(Special::Item(format!("{w}L")));
            }
            let k: u8 = match nth.parse() {
                Ok(k @ 1..=5) => k,
                _ => {
                    return Err(format!(
                        "day-of-week '{item}': the occurrence after # must be 1-5 (MON#1 is \
                         the first Monday of the month)"
                    ));
                }
            };
            self.nth[usize::from(w)] |= 1 << (k - 1);
            return Ok(Special::Item(format!("{w}#{k}")));
        }
        if let Some(base) = upper.strip_suffix('L') {
            let w = one_weekday(base)?;
            self.last_of |= 1 << w;
            return Ok(Special::Item(format!("{w}L")));
        }
        Ok(Special::Plain)
    }

    /// Days of a month selected by the day-of-month specials: bit `d` for day `d`, given
    /// the month's length and the weekday of its first day (Sunday = 0).
    pub(crate) fn month_days(&self, last: u32, first_weekday: u32) -> u64 {
        let weekday_of = |day: u32| (first_weekday + day - 1) % 7;
        let mut days = 0u64;
        if self.last_day {
            days |= 1 << last;
        }
        if self.last_weekday {
            days |= 1
                << match weekday_of(last) {
                    6 => last - 1,
                    0 => last - 2,
                    _ => last,
                };
        }
        let mut nearest = self.nearest & low_bits(last + 1);
        while nearest != 0 {
            let day = nearest.trailing_zeros();
            nearest &= nearest - 1;
            // Saturday moves back to Friday and Sunday on to Monday, unless that would
            // leave the month; a month has at least 28 days, so both stay inside.
            let target = match weekday_of(day) {
                6 if day > 1 => day - 1,
                6 => day + 2,
                0 if day < last => day + 1,
                0 => day - 2,
                _ => day,
            };
            days |= 1 << target;
        }
        days
    }

    /// Days of a month selected by the day-of-week specials (see [`Self::month_days`]).
    pub(crate) fn month_weekdays(&self, last: u32, first_weekday: u32) -> u64 {
        let mut days = 0u64;
        for w in 0..7u32 {
            let first = 1 + (w + 7 - first_weekday) % 7;
            let nth = self.nth[w as usize];
            for k in 0..5 {
                let day = first + 7 * k;
                if nth & (1 << k) != 0 && day <= last {
                    days |= 1 << day;
                }
            }
            if self.last_of & (1 << w) != 0 {
                days |= 1 << (first + 7 * ((last - first) / 7));
            }
        }
        days
    }

    /// Whether some month with at most `longest` days can have a day-of-month special day.
    pub(crate) fn day_of_month_possible(&self, longest: u32) -> bool {
        self.last_day || self.last_weekday || self.nearest & low_bits(longest + 1) != 0
    }
}

/// Days of a month on the weekdays of `weekdays` (bit `w`, Sunday = 0).
pub(crate) fn weekly_days(weekdays: u64, last: u32, first_weekday: u32) -> u64 {
    let week = weekdays & 0x7f;
    // Six weeks of the pattern cover every day of any month from any first weekday.
    let repeated = (0..6).fold(0u64, |acc, n| acc | week << (7 * n));
    // Bit d of the result is bit (d + first_weekday - 1) of the repeated weeks.
    ((repeated << 1) >> first_weekday) & low_bits(last + 1) & !1
}

/// Bits `0..n` set.
pub(crate) fn low_bits(n: u32) -> u64 {
    if n >= 64 { u64::MAX } else { (1 << n) - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn days(mask: u64) -> Vec<u32> {
        (0..64).filter(|d| mask & (1 << d) != 0).collect()
    }

    fn parse_number(text: &str) -> Result<u16, String> {
        text.parse()
            .map_err(|_| format!("'{text}' is not a number"))
    }

    // March 2026: 31 days, the 1st a Sunday.
    const MARCH_2026: (u32, u32) = (31, 0);
    // February 2026: 28 days, the 1st a Sunday. May 2026: 31 days, the 1st a Friday.
    const MAY_2026: (u32, u32) = (31, 5);

    #[test]
    fn weekly_days_follow_the_first_weekday() {
        let (last, first) = MARCH_2026;
        // Mondays of March 2026: 2, 9, 16, 23, 30.
        assert_eq!(days(weekly_days(0b10, last, first)), [2, 9, 16, 23, 30]);
        let (last, first) = MAY_2026;
        // Sundays of May 2026: 3, 10, 17, 24, 31.
        assert_eq!(days(weekly_days(0b1, last, first)), [3, 10, 17, 24, 31]);
    }

    #[test]
    fn last_and_nearest_weekdays() {
        let mut specials = DaySpecials::default();
        for item in ["L", "LW", "1W", "15W", "31W"] {
            assert!(matches!(
                specials.day_of_month_item(item, parse_number),
                Ok(Special::Item(_))
            ));
        }
        let (last, first) = MAY_2026;
        // L: 31 (Sunday). LW: Friday 29. 1W: the 1st is a Friday. 15W: Friday 15.
        // 31W: Sunday the 31st, the last day, moves back to Friday 29.
        assert_eq!(days(specials.month_days(last, first)), [1, 15, 29, 31]);
        let (last, first) = MARCH_2026;
        // 1W: Sunday the 1st → Monday 2. 15W: Sunday → Monday 16. LW: Tuesday 31.
        assert_eq!(days(specials.month_days(last, first)), [2, 16, 31]);
    }

    #[test]
    fn a_saturday_first_moves_forward_to_monday() {
        let mut specials = DaySpecials::default();
        assert!(specials.day_of_month_item("1W", parse_number).is_ok());
        // August 2026 starts on a Saturday: 1W is Monday the 3rd.
        assert_eq!(days(specials.month_days(31, 6)), [3]);
    }

    #[test]
    fn nth_and_last_weekdays() {
        let mut specials = DaySpecials::default();
        for item in ["1#1", "5L", "5#5", "0#5", "5#L"] {
            assert!(matches!(
                specials.day_of_week_item(item, parse_number),
                Ok(Special::Item(_))
            ));
        }
        let (last, first) = MAY_2026;
        // First Monday 4; last Friday 29; fifth Friday 29; fifth Sunday 31.
        assert_eq!(days(specials.month_weekdays(last, first)), [4, 29, 31]);
        let (last, first) = MARCH_2026;
        // First Monday 2; last Friday 27; no fifth Friday; fifth Sunday 29.
        assert_eq!(days(specials.month_weekdays(last, first)), [2, 27, 29]);
    }

    #[test]
    fn items_without_an_agreed_meaning_are_refused() {
        let mut specials = DaySpecials::default();
        let dom = |specials: &mut DaySpecials, item| match specials
            .day_of_month_item(item, parse_number)
        {
            Err(reason) => reason,
            Ok(_) => panic!("'{item}' was accepted"),
        };
        assert!(dom(&mut specials, "L-3").contains("offsets before the last day"));
        assert!(dom(&mut specials, "W").contains("W takes one day number"));
        assert!(dom(&mut specials, "1-5W").contains("W takes one day number"));
        let dow = |specials: &mut DaySpecials, item| match specials
            .day_of_week_item(item, parse_number)
        {
            Err(reason) => reason,
            Ok(_) => panic!("'{item}' was accepted"),
        };
        assert!(dow(&mut specials, "L").contains("a bare L has no agreed meaning"));
        assert!(dow(&mut specials, "1#6").contains("must be 1-5"));
        assert!(dow(&mut specials, "1#0").contains("must be 1-5"));
        assert!(dow(&mut specials, "1-5L").contains("not a range or a step"));
        assert!(dow(&mut specials, "#2").contains("one weekday before them"));
        assert_eq!(specials, DaySpecials::default());
    }
}
