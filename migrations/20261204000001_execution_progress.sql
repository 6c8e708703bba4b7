-- A running execution in full (issue 28): operators see the node it runs and when its
-- runner last beat, not only that it runs. Neither column is indexed, so a heartbeat
-- still updates its row in place.
ALTER TABLE executions
    ADD COLUMN heartbeat_at timestamptz,
    ADD COLUMN current_node text;
