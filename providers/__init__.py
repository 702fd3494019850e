"""Provider clients (HTTP marketplaces and local nodes) behind one protocol."""
