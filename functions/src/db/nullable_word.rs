//! A nullable text column holding one of a wire enum's words, decoded like the non-null
//! ones (`#[sqlx(try_from = "String")]`): sqlx cannot decode an `Option` of a type it does
//! not know, and the enums live in `res-shared`, which knows nothing of databases.

/// `#[sqlx(try_from = "Option<String>")]`: NULL is `None`, a word is its value, anything
/// else fails the row as the non-null columns do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct NullableWord<T>(pub(crate) Option<T>);

impl<T: TryFrom<String, Error = String>> TryFrom<Option<String>> for NullableWord<T> {
    type Error = String;

    fn try_from(stored: Option<String>) -> Result<Self, Self::Error> {
        stored.map(T::try_from).transpose().map(NullableWord)
    }
}

#[cfg(test)]
mod tests {
    use res_shared::wire::ExecutionStatus;

    use super::NullableWord;

    #[test]
    fn null_is_none_a_word_is_its_value_and_anything_else_is_refused() {
        let decode = |stored: Option<&str>| {
            NullableWord::<ExecutionStatus>::try_from(stored.map(str::to_owned))
        };
        assert_eq!(decode(None), Ok(NullableWord(None)));
        assert_eq!(
            decode(Some("paused")),
            Ok(NullableWord(Some(ExecutionStatus::Paused)))
        );
        assert!(decode(Some("asleep")).is_err_and(|e| e.contains("asleep")));
    }
}
