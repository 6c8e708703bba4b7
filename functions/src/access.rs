//! Who may see what: a key's role and the branches it is scoped to. Plain data that both the
//! token check (`auth`) and the SQL (`db`) use, so neither imports the other's types.

use uuid::Uuid;

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sees every branch; may use the legacy next-run call.
    Service,
    /// Sees only its branches.
    Runner,
}

impl Role {
    /// The name stored in `api_keys.role`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Service => "service",
            Role::Runner => "runner",
        }
    }

    /// Parses a stored or typed role name.
    pub fn parse(name: &str) -> Option<Role> {
        match name {
            "service" => Some(Role::Service),
            "runner" => Some(Role::Runner),
            _ => None,
        }
    }
}

/// The authenticated caller of a function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub key_id: Uuid,
    /// What the key may do.
    pub role: Role,
    /// The branches a runner key sees (ignored for service keys).
    pub branch_ids: Vec<Uuid>,
}

/// The branches a query may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Every branch.
    All,
    /// Only these.
    Branches(&'a [Uuid]),
}

impl Caller {
    /// Whether the caller may see a branch.
    pub fn sees_branch(&self, branch_id: Uuid) -> bool {
        self.role == Role::Service || self.branch_ids.contains(&branch_id)
    }

    pub fn scope(&self) -> Scope<'_> {
        match self.role {
            Role::Service => Scope::All,
            Role::Runner => Scope::Branches(&self.branch_ids),
        }
    }
}

impl Scope<'_> {
    /// `(all, ids)`: the two parameters scoped queries take (for `db` only).
    pub(crate) fn as_params(self) -> (bool, Vec<Uuid>) {
        match self {
            Scope::All => (true, Vec::new()),
            Scope::Branches(ids) => (false, ids.to_vec()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runners_see_only_their_branches() {
        let mine = Uuid::new_v4();
        let runner = Caller {
            key_id: Uuid::new_v4(),
            role: Role::Runner,
            branch_ids: vec![mine],
        };
        assert!(runner.sees_branch(mine));
        assert!(!runner.sees_branch(Uuid::new_v4()));
        let service = Caller {
            role: Role::Service,
            branch_ids: vec![],
            ..runner
        };
        assert!(service.sees_branch(Uuid::new_v4()));
    }
}
