-- A running execution waiting in place at a delay node says so through its heartbeats:
-- operators see "waits at <node> until <time>" instead of a bare "running".
ALTER TABLE executions
    ADD COLUMN waiting_node text,
    ADD COLUMN waiting_until timestamptz;
