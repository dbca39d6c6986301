"""`tandem chaos`: fault drills against real `tandem up` runs, reported as one JSON document."""
