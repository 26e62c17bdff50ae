"""What clients do: lock implementations behind one Lock protocol, and the workloads."""
