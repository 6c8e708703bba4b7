-- A window's start of 24:00 has no meaning (24:00 is the end of the day; as a start it
-- would read as the day's first minute, 00:00). Refused from now on; NOT VALID leaves any
-- existing row as it is, read as 00:00 exactly as before.
ALTER TABLE branch_rules
    ADD CONSTRAINT branch_rules_window_starts_before_end_of_day
    CHECK (operation_time_from < '24:00') NOT VALID;
