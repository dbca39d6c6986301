"""CurveZMQ for links that leave this machine: key directories (`tandem keys`) and a daemon's set-up of them."""
