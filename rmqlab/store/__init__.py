"""rmqlab.store"""
