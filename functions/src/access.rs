//! Who may see what: a key's role and the branches it is scoped to. Plain data that both the
//! token check (`auth`) and the SQL (`db`) use, so neither imports the other's types.

use uuid::Uuid;

pub use res_shared::wire::Role;

/// The authenticated caller of a function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub key_id: Uuid,
    /// Recorded as "who" on every operator action.
    pub key_name: String,
    pub role: Role,
    /// An operator or viewer key made for every brand.
    pub all_brands: bool,
    /// The branches the key sees: its own list plus every branch of its brands, resolved
    /// when the token is checked (ignored for service and all-brand keys).
    pub branch_ids: Vec<Uuid>,
}

/// Why a caller may not use a function at all (answered 403, before anything is read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// Runner keys serve sites; operator functions are for people and their tools.
    RunnerKey,
    /// Viewer keys read; they cannot act.
    ReadOnly,
    /// Managing keys (and configuration) takes an admin key.
    NotAdmin,
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
        match self.scope() {
            Scope::All => true,
            Scope::Branches(ids) => ids.contains(&branch_id),
        }
    }

    pub fn scope(&self) -> Scope<'_> {
        match self.role {
            Role::Service => Scope::All,
            Role::Operator | Role::Viewer | Role::Admin if self.all_brands => Scope::All,
            Role::Runner | Role::Operator | Role::Viewer | Role::Admin => {
                Scope::Branches(&self.branch_ids)
            }
        }
    }

    /// May read the operator functions (history, describe, runners, violations).
    pub fn may_read(&self) -> Result<(), Denied> {
        match self.role {
            Role::Runner => Err(Denied::RunnerKey),
            Role::Service | Role::Operator | Role::Viewer | Role::Admin => Ok(()),
        }
    }

    /// May manage the keys inside its scope.
    pub fn may_administer(&self) -> Result<(), Denied> {
        match self.role {
            Role::Service | Role::Admin => Ok(()),
            Role::Runner => Err(Denied::RunnerKey),
            Role::Operator | Role::Viewer => Err(Denied::NotAdmin),
        }
    }

    /// May act through the operator functions (run now, pause, resume, cancel).
    pub fn may_act(&self) -> Result<(), Denied> {
        self.may_read()?;
        match self.role {
            Role::Viewer => Err(Denied::ReadOnly),
            _ => Ok(()),
        }
    }
}

/// Which scopes a role takes: a service key sees everything and takes none; a runner key
/// names its site's branches; the others name brands and/or branches, or every brand.
/// The error says what to change (the CLI and `keys_create` both ask this).
pub fn key_shape(
    role: Role,
    all_brands: bool,
    brands: usize,
    branches: usize,
) -> Result<(), String> {
    let scoped = brands > 0 || branches > 0;
    match role {
        Role::Service if scoped || all_brands => {
            Err("service keys see every branch; branches, brands and all-brands do not apply".into())
        }
        Role::Runner if brands > 0 || all_brands => Err(
            "a runner key is scoped to its site's branches: name branches, not brands or all brands"
                .into(),
        ),
        Role::Runner if branches == 0 => Err("a runner key needs at least one branch".into()),
        Role::Operator | Role::Viewer | Role::Admin if scoped && all_brands => {
            Err("all brands already covers every branch; name no brand or branch with it".into())
        }
        Role::Operator | Role::Viewer | Role::Admin if !scoped && !all_brands => Err(format!(
            "an {} key needs a scope: brands, branches or all brands",
            role.as_str()
        )),
        _ => Ok(()),
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
            key_name: "site 17".into(),
            role: Role::Runner,
            all_brands: false,
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

    #[test]
    fn operators_see_their_scope_and_only_they_and_service_keys_act() {
        let mine = Uuid::new_v4();
        let operator = Caller {
            key_id: Uuid::new_v4(),
            key_name: "brand admin".into(),
            role: Role::Operator,
            all_brands: false,
            branch_ids: vec![mine],
        };
        assert!(operator.sees_branch(mine) && !operator.sees_branch(Uuid::new_v4()));
        assert_eq!(operator.may_act(), Ok(()));
        let everywhere = Caller {
            all_brands: true,
            ..operator.clone()
        };
        assert!(everywhere.sees_branch(Uuid::new_v4()));
        let viewer = Caller {
            role: Role::Viewer,
            ..operator.clone()
        };
        assert_eq!(viewer.may_read(), Ok(()));
        assert_eq!(viewer.may_act(), Err(Denied::ReadOnly));
        let runner = Caller {
            role: Role::Runner,
            ..operator
        };
        assert_eq!(runner.may_read(), Err(Denied::RunnerKey));
        assert_eq!(runner.may_act(), Err(Denied::RunnerKey));
    }
}
