//! One spelling for every word on the wire: an enum whose values travel as JSON strings and
//! are stored as text gets its names, `ALL`, `parse`, `TryFrom<String>` and `Display` from
//! one table, so the serde spelling and the database spelling cannot drift apart.

/// Declares a wire enum from `Variant = "spelling"` pairs; `$what` names it in the error of
/// a stored value that is none of them.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($what:literal) {
            $($(#[$variant_meta:meta])* $variant:ident = $text:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash,
            serde::Serialize, serde::Deserialize,
        )]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub enum $name {
            $($(#[$variant_meta])* #[serde(rename = $text)] $variant,)*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: [$name; [$($text),*].len()] = [$($name::$variant),*];

            /// The name sent on the wire and stored in the database.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// The value of a name, if it is one.
            pub fn parse(name: &str) -> Option<$name> {
                $name::ALL.into_iter().find(|value| value.as_str() == name)
            }
        }

        /// Decodes a stored name (databases hand back text).
        impl TryFrom<String> for $name {
            type Error = String;

            fn try_from(name: String) -> Result<Self, Self::Error> {
                $name::parse(&name).ok_or_else(|| format!(concat!("unknown ", $what, " {:?}"), name))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        #[cfg(test)]
        impl $crate::wire_enum::Spelled for $name {
            fn all() -> Vec<Self> {
                $name::ALL.to_vec()
            }
            fn spelling(self) -> &'static str {
                self.as_str()
            }
            fn parse_name(name: &str) -> Option<Self> {
                $name::parse(name)
            }
        }
    };
}

/// What the round-trip test asks of every wire enum.
#[cfg(test)]
pub(crate) trait Spelled:
    Copy
    + PartialEq
    + std::fmt::Debug
    + std::fmt::Display
    + serde::Serialize
    + serde::de::DeserializeOwned
    + TryFrom<String, Error = String>
{
    fn all() -> Vec<Self>;
    fn spelling(self) -> &'static str;
    fn parse_name(name: &str) -> Option<Self>;
}

#[cfg(test)]
mod tests {
    use super::Spelled;
    use crate::schedule::RuleStatus;
    use crate::wire::{
        AttentionKind, ChannelKind, ClaimRefusalReason, ErrorCode, ExecutionStatus, OutputStream,
        Role, RuleAction, RuleCondition, RunnerState, StopAction, Trigger,
    };

    /// Each value's serde, database and display spellings are one, and parse back to it.
    fn round_trips<T: Spelled>() {
        let all = T::all();
        assert!(!all.is_empty());
        let mut names: Vec<&str> = all.iter().map(|v| v.spelling()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names.len(),
            all.len(),
            "two values share a spelling: {all:?}"
        );
        for value in all {
            let name = value.spelling();
            let json = serde_json::to_value(value).expect("serialises");
            assert_eq!(json, serde_json::json!(name), "{value:?}");
            assert_eq!(serde_json::from_value::<T>(json).ok(), Some(value));
            assert_eq!(T::parse_name(name), Some(value));
            assert_eq!(T::try_from(name.to_owned()), Ok(value));
            assert_eq!(value.to_string(), name);
        }
        assert_eq!(T::parse_name("no such word"), None);
        let refused = T::try_from("no such word".to_owned()).err();
        assert!(refused.is_some_and(|e| e.contains("unknown") && e.contains("no such word")));
        assert!(serde_json::from_value::<T>(serde_json::json!("no such word")).is_err());
    }

    #[test]
    fn every_wire_enum_is_spelled_one_way_on_the_wire_in_the_database_and_on_screen() {
        round_trips::<AttentionKind>();
        round_trips::<ChannelKind>();
        round_trips::<ClaimRefusalReason>();
        round_trips::<ErrorCode>();
        round_trips::<ExecutionStatus>();
        round_trips::<OutputStream>();
        round_trips::<Role>();
        round_trips::<RuleAction>();
        round_trips::<RuleCondition>();
        round_trips::<RuleStatus>();
        round_trips::<RunnerState>();
        round_trips::<StopAction>();
        round_trips::<Trigger>();
    }

    #[test]
    fn a_claim_refusals_code_is_its_reason() {
        for reason in ClaimRefusalReason::ALL {
            assert_eq!(reason.code().as_str(), reason.as_str());
        }
    }
}
