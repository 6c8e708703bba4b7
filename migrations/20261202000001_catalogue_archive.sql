-- A catalogue document that leaves out a rule or an action template archives it, as a brand
-- document archives its branches: kept (archived branch rules and their executions still
-- point at it), out of every export, and its name free for a new one.
ALTER TABLE rules ADD COLUMN is_archived boolean NOT NULL DEFAULT false;
ALTER TABLE action_templates ADD COLUMN is_archived boolean NOT NULL DEFAULT false;
