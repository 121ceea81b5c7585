"""rmqlab.codec"""
